/* dicom_writer.h: the tests' DICOM writer (dicom_writer.cpp, GDCM's gdcm::Writer), so the
 * DICOM reader is tested on series made here with every header field known. Built only
 * when GDCM is (SIM_HAVE_DICOM). */
#ifndef TESTS_SIM_DICOM_WRITER_H
#define TESTS_SIM_DICOM_WRITER_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One CT slice, one file. Fields left 0 / NULL are left out of the file (a malformed one). */
typedef struct tw_dicom_slice {
    int cols, rows;
    const int16_t *pixels; /* (rows x cols), stored values, signed 16 bits */
    double ipp[3];         /* ImagePositionPatient, mm (LPS) */
    double iop[6];         /* ImageOrientationPatient: row then column direction (LPS) */
    double ps[2];          /* PixelSpacing: between rows, between columns, mm */
    double slope, intercept;
    int has_ipp;            /* 0: no ImagePositionPatient */
    const char *series_uid; /* SeriesInstanceUID */
    int instance;           /* InstanceNumber */
    int jpeg2000;           /* 1: JPEG 2000 lossless, else explicit VR little endian */
    int no_pixels;          /* 1: a text report (SR): DICOM without an image */
    /* Patient identifiers written into every file, which the reader must never repeat. */
    const char *patient_name, *patient_id;
} tw_dicom_slice;

/* Write s to path; 1 on success. */
int tw_dicom_write(const char *path, const tw_dicom_slice *s);

/* Write n slices as one multi-frame file: with placed = 1 an Enhanced CT image, each frame
 * placed by its functional groups (position and rescale per frame; orientation and pixel
 * spacing shared); with placed = 0 an X-ray angiography cine (frames, no positions). The
 * series, sizes, instance, patient and jpeg2000 come from f[0]. 1 on success. */
int tw_dicom_write_multiframe(const char *path, const tw_dicom_slice *f, int n, int placed);

#ifdef __cplusplus
}
#endif
#endif
