/* dicom_writer.cpp: CT slices written through GDCM for the DICOM reader's tests: the data
 * set built element by element (gdcm::Writer, explicit VR little endian, the file meta
 * filled from it), then, for JPEG 2000, read back and transcoded by
 * gdcm::ImageChangeTransferSyntax to JPEG2000Lossless, as a PACS export would store it. */
#include "tests/sim/dicom_writer.h"

#if SIM_HAVE_DICOM

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <gdcmDataElement.h>
#include <gdcmImageChangeTransferSyntax.h>
#include <gdcmImageReader.h>
#include <gdcmReader.h>
#include <gdcmImageWriter.h>
#include <gdcmSequenceOfItems.h>
#include <gdcmTrace.h>
#include <gdcmUIDGenerator.h>
#include <gdcmWriter.h>

namespace
{

void put_str(gdcm::DataSet &ds, uint16_t g, uint16_t e, gdcm::VR vr, std::string v)
{
    if (v.size() % 2) // DICOM values have even lengths: UIDs pad with NUL, text with space
        v += vr == gdcm::VR::UI ? '\0' : ' ';
    gdcm::DataElement de(gdcm::Tag(g, e));
    de.SetVR(vr);
    de.SetByteValue(v.data(), (uint32_t)v.size());
    ds.Replace(de);
}

void put_us(gdcm::DataSet &ds, uint16_t g, uint16_t e, uint16_t v)
{
    gdcm::DataElement de(gdcm::Tag(g, e));
    de.SetVR(gdcm::VR::US);
    de.SetByteValue((const char *)&v, 2);
    ds.Replace(de);
}

std::string nums(const double *v, int n)
{
    std::string s;
    for (int i = 0; i < n; i++) {
        char b[40];
        std::snprintf(b, sizeof b, "%s%.6g", i ? "\\" : "", v[i]);
        s += b;
    }
    return s;
}

void put_image(gdcm::DataSet &ds, const tw_dicom_slice *s)
{
    put_us(ds, 0x0028, 0x0002, 1);
    put_str(ds, 0x0028, 0x0004, gdcm::VR::CS, "MONOCHROME2");
    put_us(ds, 0x0028, 0x0010, (uint16_t)s->rows);
    put_us(ds, 0x0028, 0x0011, (uint16_t)s->cols);
    put_us(ds, 0x0028, 0x0100, 16);
    put_us(ds, 0x0028, 0x0101, 16);
    put_us(ds, 0x0028, 0x0102, 15);
    put_us(ds, 0x0028, 0x0103, 1);
    if (s->has_ipp)
        put_str(ds, 0x0020, 0x0032, gdcm::VR::DS, nums(s->ipp, 3));
    put_str(ds, 0x0020, 0x0037, gdcm::VR::DS, nums(s->iop, 6));
    put_str(ds, 0x0028, 0x0030, gdcm::VR::DS, nums(s->ps, 2));
    put_str(ds, 0x0028, 0x1052, gdcm::VR::DS, nums(&s->intercept, 1));
    put_str(ds, 0x0028, 0x1053, gdcm::VR::DS, nums(&s->slope, 1));
    gdcm::DataElement px(gdcm::Tag(0x7fe0, 0x0010));
    px.SetVR(gdcm::VR::OW);
    px.SetByteValue((const char *)s->pixels, (uint32_t)(2 * s->rows * s->cols));
    ds.Replace(px);
}

bool transcode_j2k(const char *path)
{
    gdcm::ImageReader r;
    r.SetFileName(path);
    if (!r.Read())
        return false;
    gdcm::ImageChangeTransferSyntax change;
    change.SetTransferSyntax(gdcm::TransferSyntax::JPEG2000Lossless);
    change.SetInput(r.GetImage());
    if (!change.Change())
        return false;
    gdcm::ImageWriter w;
    w.SetFileName(path);
    w.SetFile(r.GetFile());
    w.SetImage(change.GetOutput());
    return w.Write();
}

// Sequence (g,e) of the given items' data sets.
void put_seq(gdcm::DataSet &ds, uint16_t g, uint16_t e, const std::vector<gdcm::DataSet> &items)
{
    gdcm::SmartPointer<gdcm::SequenceOfItems> sq = new gdcm::SequenceOfItems();
    sq->SetLengthToUndefined();
    for (const gdcm::DataSet &d : items) {
        gdcm::Item it;
        it.SetVLToUndefined();
        it.SetNestedDataSet(d);
        sq->AddItem(it);
    }
    gdcm::DataElement de(gdcm::Tag(g, e));
    de.SetVR(gdcm::VR::SQ);
    de.SetValue(*sq);
    de.SetVLToUndefined();
    ds.Replace(de);
}

// A sequence of one item holding one text value: a functional group's macro.
gdcm::DataSet macro(uint16_t g, uint16_t e, gdcm::VR vr, const std::string &v)
{
    gdcm::DataSet d;
    put_str(d, g, e, vr, v);
    return d;
}

// transcode_j2k for a multi-frame image: GDCM's ImageWriter rewrites the functional groups
// from its own idea of the geometry (a spacing of 1, positions in frame order), which a
// scanner's JPEG 2000 export does not; so the groups as written are put back after it.
bool transcode_j2k_keeping_groups(const char *path, const gdcm::DataSet &groups)
{
    if (!transcode_j2k(path))
        return false;
    gdcm::Reader r;
    r.SetFileName(path);
    if (!r.Read())
        return false;
    gdcm::DataSet &ds = r.GetFile().GetDataSet();
    for (uint16_t e : {0x9229, 0x9230}) {
        gdcm::Tag t(0x5200, e);
        if (groups.FindDataElement(t))
            ds.Replace(groups.GetDataElement(t));
    }
    gdcm::Writer w;
    w.SetFileName(path);
    w.SetFile(r.GetFile());
    return w.Write();
}

} // namespace

extern "C" int tw_dicom_write_multiframe(const char *path, const tw_dicom_slice *f, int n,
                                         int placed)
{
    gdcm::Trace::SetWarning(false);
    gdcm::UIDGenerator uid;
    gdcm::Writer w;
    gdcm::DataSet &ds = w.GetFile().GetDataSet();
    put_str(ds, 0x0008, 0x0016, gdcm::VR::UI,
            placed ? "1.2.840.10008.5.1.4.1.1.2.1"    // Enhanced CT Image Storage
                   : "1.2.840.10008.5.1.4.1.1.12.1"); // X-Ray Angiographic Image Storage
    put_str(ds, 0x0008, 0x0018, gdcm::VR::UI, uid.Generate());
    put_str(ds, 0x0008, 0x0060, gdcm::VR::CS, placed ? "CT" : "XA");
    if (f[0].patient_name)
        put_str(ds, 0x0010, 0x0010, gdcm::VR::PN, f[0].patient_name);
    if (f[0].patient_id)
        put_str(ds, 0x0010, 0x0020, gdcm::VR::LO, f[0].patient_id);
    put_str(ds, 0x0020, 0x000d, gdcm::VR::UI, "1.2.826.0.1.3680043.8.498.1");
    put_str(ds, 0x0020, 0x000e, gdcm::VR::UI, f[0].series_uid ? f[0].series_uid : "1.2.3.4");
    char num[16];
    std::snprintf(num, sizeof num, "%d", f[0].instance);
    put_str(ds, 0x0020, 0x0013, gdcm::VR::IS, num);
    std::snprintf(num, sizeof num, "%d", n);
    put_str(ds, 0x0028, 0x0008, gdcm::VR::IS, num);
    put_image(ds, &f[0]); // the header and the first frame; the pixel data is replaced below
    // Enhanced images keep geometry and rescale in functional groups, not at the top level.
    for (uint16_t e : {0x0032, 0x0037})
        ds.Remove(gdcm::Tag(0x0020, e));
    for (uint16_t e : {0x0030, 0x1052, 0x1053})
        ds.Remove(gdcm::Tag(0x0028, e));
    if (placed) {
        gdcm::DataSet shared;
        put_seq(shared, 0x0028, 0x9110, {macro(0x0028, 0x0030, gdcm::VR::DS, nums(f[0].ps, 2))});
        put_seq(shared, 0x0020, 0x9116, {macro(0x0020, 0x0037, gdcm::VR::DS, nums(f[0].iop, 6))});
        put_seq(ds, 0x5200, 0x9229, {shared});
        std::vector<gdcm::DataSet> per;
        for (int k = 0; k < n; k++) {
            gdcm::DataSet d, rescale;
            put_seq(d, 0x0020, 0x9113, {macro(0x0020, 0x0032, gdcm::VR::DS, nums(f[k].ipp, 3))});
            put_str(rescale, 0x0028, 0x1052, gdcm::VR::DS, nums(&f[k].intercept, 1));
            put_str(rescale, 0x0028, 0x1053, gdcm::VR::DS, nums(&f[k].slope, 1));
            put_str(rescale, 0x0028, 0x1054, gdcm::VR::LO, "HU");
            put_seq(d, 0x0028, 0x9145, {rescale});
            per.push_back(d);
        }
        put_seq(ds, 0x5200, 0x9230, per);
    }
    size_t plane = (size_t)f[0].rows * (size_t)f[0].cols;
    std::vector<int16_t> px(plane * (size_t)n);
    for (int k = 0; k < n; k++)
        std::memcpy(&px[plane * (size_t)k], f[k].pixels, plane * sizeof(int16_t));
    gdcm::DataElement de(gdcm::Tag(0x7fe0, 0x0010));
    de.SetVR(gdcm::VR::OW);
    de.SetByteValue((const char *)px.data(), (uint32_t)(px.size() * sizeof(int16_t)));
    ds.Replace(de);
    w.GetFile().GetHeader().SetDataSetTransferSyntax(gdcm::TransferSyntax::ExplicitVRLittleEndian);
    w.SetFileName(path);
    if (!w.Write())
        return 0;
    return f[0].jpeg2000 ? (int)transcode_j2k_keeping_groups(path, ds) : 1;
}

extern "C" int tw_dicom_write(const char *path, const tw_dicom_slice *s)
{
    gdcm::Trace::SetWarning(false);
    gdcm::UIDGenerator uid;
    gdcm::Writer w;
    gdcm::DataSet &ds = w.GetFile().GetDataSet();
    const char *sop_class = s->no_pixels ? "1.2.840.10008.5.1.4.1.1.88.11" // Basic Text SR
                                         : "1.2.840.10008.5.1.4.1.1.2";    // CT Image Storage
    put_str(ds, 0x0008, 0x0016, gdcm::VR::UI, sop_class);
    put_str(ds, 0x0008, 0x0018, gdcm::VR::UI, uid.Generate());
    put_str(ds, 0x0008, 0x0060, gdcm::VR::CS, s->no_pixels ? "SR" : "CT");
    if (s->patient_name)
        put_str(ds, 0x0010, 0x0010, gdcm::VR::PN, s->patient_name);
    if (s->patient_id)
        put_str(ds, 0x0010, 0x0020, gdcm::VR::LO, s->patient_id);
    put_str(ds, 0x0020, 0x000d, gdcm::VR::UI, "1.2.826.0.1.3680043.8.498.1");
    put_str(ds, 0x0020, 0x000e, gdcm::VR::UI, s->series_uid ? s->series_uid : "1.2.3.4");
    char inst[16];
    std::snprintf(inst, sizeof inst, "%d", s->instance);
    put_str(ds, 0x0020, 0x0013, gdcm::VR::IS, inst);
    if (!s->no_pixels)
        put_image(ds, s);
    w.GetFile().GetHeader().SetDataSetTransferSyntax(gdcm::TransferSyntax::ExplicitVRLittleEndian);
    w.SetFileName(path);
    if (!w.Write())
        return 0;
    return s->jpeg2000 && !s->no_pixels ? (int)transcode_j2k(path) : 1;
}

#else

extern "C" int tw_dicom_write(const char *path, const tw_dicom_slice *s)
{
    (void)path, (void)s;
    return 0;
}

extern "C" int tw_dicom_write_multiframe(const char *path, const tw_dicom_slice *f, int n,
                                         int placed)
{
    (void)path, (void)f, (void)n, (void)placed;
    return 0;
}

#endif
